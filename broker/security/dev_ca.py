"""A small certificate authority for tests and trials (`samsa tls`), made with the `cryptography` package.

Not for production: keys are unencrypted PEM files and certificates live a year. It writes what Kafka's
PEM stores expect: ca.pem (ssl.truststore.location with ssl.truststore.type=PEM) and, per name,
<name>.pem holding the private key followed by its certificate (ssl.keystore.location with
ssl.keystore.type=PEM), plus <name>.key / <name>.crt separately for clients that want them apart
(confluent-kafka's ssl.key.location / ssl.certificate.location) and <name>.p12 (PKCS12, password given).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

VALID_DAYS = 365


@dataclass(frozen=True, slots=True)
class IssuedFiles:
    key_and_chain: Path  # <name>.pem: key then certificate
    key: Path
    certificate: Path
    pkcs12: Path


def _name(common_name: str, organization: str | None = None) -> object:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def make_ca(directory: Path, common_name: str = "Samsa Test CA") -> Path:
    """Create ca.pem (certificate) and ca.key in `directory`; the certificate's path."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)  # type: ignore[arg-type]
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / "ca.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    (directory / "ca.key").chmod(0o600)
    path = directory / "ca.pem"
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def issue(directory: Path, name: str, common_name: str, *, organization: str | None = None,
          hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), pkcs12_password: str = "changeit") -> IssuedFiles:
    """A key and a certificate signed by the CA in `directory` (make_ca first), valid for `hosts`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12

    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    ca_cert = x509.load_pem_x509_certificate((directory / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    certificate = (
        x509.CertificateBuilder().subject_name(_name(common_name, organization))  # type: ignore[arg-type]
        .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    files = IssuedFiles(directory / f"{name}.pem", directory / f"{name}.key", directory / f"{name}.crt",
                        directory / f"{name}.p12")
    files.key_and_chain.write_bytes(key_pem + cert_pem)
    files.key.write_bytes(key_pem)
    files.certificate.write_bytes(cert_pem)
    files.pkcs12.write_bytes(pkcs12.serialize_key_and_certificates(
        name.encode(), key, certificate, [ca_cert],
        serialization.BestAvailableEncryption(pkcs12_password.encode())))
    for path in (files.key_and_chain, files.key, files.pkcs12):
        path.chmod(0o600)
    return files
