"""TLS for a listener: an ssl.SSLContext from Kafka's ssl.* keys, and the principal of a client certificate.

Key and trust stores are PEM (ssl.keystore.type=PEM: ssl.keystore.location holding the private key and
the certificate chain, or the PEM text itself in ssl.keystore.certificate.chain / ssl.keystore.key) or
PKCS12 (converted to PEM with the `cryptography` package); Java's JKS is refused with a message saying
so. ssl.client.auth none / requested / required is CERT_NONE / CERT_OPTIONAL / CERT_REQUIRED.

The principal of a client certificate is its subject's distinguished name as Java's
X500Principal.getName() prints it (RFC 2253: most specific RDN first, "CN=alice,OU=eng,O=acme"), put
through ssl.principal.mapping.rules (Kafka's SslPrincipalMapper: DEFAULT keeps it, RULE:pattern/
replacement/[LU] rewrites a DN the pattern matches whole; no matching rule refuses the client).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from samsa.broker.security.listeners import ListenerConfigError

# Reads one (possibly listener-prefixed) key: listener.name.<listener>.<key>, else <key>.
KeyReader = Callable[[str], str]


def listener_key_reader(get: Callable[[str], str], listener_name: str) -> KeyReader:
    """`get` (BrokerConfig.get: KeyError for an unknown key) with Kafka's per-listener override."""
    prefix = f"listener.name.{listener_name.lower()}."

    def read(key: str) -> str:
        try:
            value = get(prefix + key)
            if value != "":
                return value
        except KeyError:
            pass
        return get(key)

    return read


def _protocol_bounds(read: KeyReader) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    enabled = {p.strip() for p in read("ssl.enabled.protocols").split(",") if p.strip()}
    versions = [v for name, v in (("TLSv1.2", ssl.TLSVersion.TLSv1_2), ("TLSv1.3", ssl.TLSVersion.TLSv1_3))
                if name in enabled]
    if not versions:
        raise ListenerConfigError(f"ssl.enabled.protocols: none of {sorted(enabled)} is TLSv1.2 or TLSv1.3")
    return versions[0], versions[-1]


@contextmanager
def _pem_file(data: bytes) -> Iterator[str]:
    """A private temporary file holding `data` for the ssl module's file-only loaders, removed at once."""
    fd, path = tempfile.mkstemp(prefix="samsa-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


def _pkcs12_to_pem(path: str, password: str) -> tuple[bytes, bytes, list[bytes]]:
    """(private key PEM, certificate chain PEM, other certificates PEM) of a PKCS12 file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(Path(path).read_bytes(), password.encode() or None)
    except (OSError, ValueError) as e:
        raise ListenerConfigError(f"cannot read PKCS12 store {path}: {e}") from e
    key_pem = b"" if key is None else key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    chain = ([cert] if cert is not None else []) + list(extra)
    return key_pem, b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain), \
        [c.public_bytes(serialization.Encoding.PEM) for c in extra]


def _load_key_store(context: ssl.SSLContext, read: KeyReader, *, required: bool) -> None:
    store_type = read("ssl.keystore.type").upper()
    location = read("ssl.keystore.location")
    chain_text = read("ssl.keystore.certificate.chain")
    key_text = read("ssl.keystore.key")
    key_password = read("ssl.key.password") or None
    if chain_text and key_text:
        with _pem_file(key_text.encode() + b"\n" + chain_text.encode()) as path:
            context.load_cert_chain(path, password=key_password)
        return
    if not location:
        if required:
            raise ListenerConfigError("an SSL listener needs ssl.keystore.location (or ssl.keystore.certificate.chain"
                                      " and ssl.keystore.key)")
        return
    try:
        if store_type == "PEM":
            context.load_cert_chain(location, password=key_password)
        elif store_type == "PKCS12":
            key_pem, chain_pem, _ = _pkcs12_to_pem(location, read("ssl.keystore.password"))
            with _pem_file(key_pem + chain_pem) as path:
                context.load_cert_chain(path)
        else:
            raise ListenerConfigError(f"ssl.keystore.type {store_type} is not supported: use PEM or PKCS12")
    except (OSError, ssl.SSLError) as e:
        raise ListenerConfigError(f"cannot load the key store {location}: {e}") from e


def _load_trust_store(context: ssl.SSLContext, read: KeyReader) -> bool:
    """Load the trusted certificates; False if none are configured."""
    certificates = read("ssl.truststore.certificates")
    location = read("ssl.truststore.location")
    try:
        if certificates:
            context.load_verify_locations(cadata=certificates)
            return True
        if not location:
            return False
        store_type = read("ssl.truststore.type").upper()
        if store_type == "PEM":
            context.load_verify_locations(cafile=location)
        elif store_type == "PKCS12":
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.serialization import pkcs12

            store = pkcs12.load_pkcs12(Path(location).read_bytes(), read("ssl.truststore.password").encode() or None)
            certs = ([store.cert.certificate] if store.cert is not None else []) + \
                [c.certificate for c in store.additional_certs]
            context.load_verify_locations(
                cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
        else:
            raise ListenerConfigError(f"ssl.truststore.type {store_type} is not supported: use PEM or PKCS12")
    except (OSError, ValueError, ssl.SSLError) as e:
        raise ListenerConfigError(f"cannot load the trust store {location or '(ssl.truststore.certificates)'}: {e}"
                                  ) from e
    return True


def _set_ciphers(context: ssl.SSLContext, read: KeyReader) -> None:
    suites = [c.strip() for c in read("ssl.cipher.suites").split(",") if c.strip()]
    if suites:
        try:
            context.set_ciphers(":".join(suites))
        except ssl.SSLError as e:
            raise ListenerConfigError(f"ssl.cipher.suites: no usable cipher in {suites} (OpenSSL names)") from e


class DirectSSLObject(ssl.SSLObject):
    """An ssl.SSLObject whose `read` and `pending` are its C object's own methods, not ssl.py's Python wrappers
    around them (same arguments, same results, same exceptions).

    The TLS transport calls both once per TLS record it decrypts, from Cython, and a Python frame entered from C
    costs more than the call it wraps. A librdkafka producer's records are small (it hands OpenSSL one buffer
    segment at a time: 400,000-550,000 records per GiB of 1 KiB messages, counted), so this is per ~2-3 KiB.
    Measured (perf, bench.tls_profile SASL_SSL, 600,000 records, back to back): the Python frames under the TLS
    transport 0.48 -> 0.32 s per GiB, the broker's CPU 2.03 -> 1.92 s per GiB; small, and near this shared
    machine's run-to-run noise. Falls back to ssl.SSLObject's own methods if its internals ever differ."""

    @classmethod
    def _create(cls, *args: Any, **kwargs: Any) -> DirectSSLObject:
        obj = cast(DirectSSLObject, super()._create(*args, **kwargs))  # type: ignore[misc]
        direct = getattr(obj, "_sslobj", None)  # ssl.py's name for the C object (3.7+)
        if direct is not None and hasattr(direct, "read") and hasattr(direct, "pending"):
            vars(obj).update(read=direct.read, pending=direct.pending)  # instance attributes shadow the methods
        return obj


def server_context(read: KeyReader) -> ssl.SSLContext:
    """The SSLContext of an SSL / SASL_SSL listener; ListenerConfigError for a config it cannot use."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.sslobject_class = DirectSSLObject  # (SSLContext.wrap_bio makes this class: the loops' TLS transports)
    context.minimum_version, context.maximum_version = _protocol_bounds(read)
    _set_ciphers(context, read)
    _load_key_store(context, read, required=True)
    trusted = _load_trust_store(context, read)
    client_auth = read("ssl.client.auth")
    if client_auth in ("requested", "required"):
        if not trusted:
            raise ListenerConfigError(f"ssl.client.auth={client_auth} needs a trust store (ssl.truststore.location)")
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


def client_context(read: KeyReader) -> ssl.SSLContext:
    """The SSLContext a broker uses to reach another broker's SSL / SASL_SSL listener."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version, context.maximum_version = _protocol_bounds(read)
    _set_ciphers(context, read)
    _load_key_store(context, read, required=False)
    if not _load_trust_store(context, read):
        context.load_default_certs()
    context.check_hostname = read("ssl.endpoint.identification.algorithm").lower() == "https"
    return context


# --- principals --------------------------------------------------------------------------------------

def distinguished_name(der: bytes) -> str:
    """A certificate's subject as Java's X500Principal.getName() (RFC 2253) prints it."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


@dataclass(frozen=True, slots=True)
class MappingRule:
    """One ssl.principal.mapping.rules entry; pattern None is DEFAULT."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""  # "L" lower-cases the result, "U" upper-cases it

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = match.expand(self.replacement)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def parse_mapping_rules(text: str) -> tuple[MappingRule, ...]:
    """Kafka's SslPrincipalMapper.parseRules; ListenerConfigError for text it cannot read."""
    rules: list[MappingRule] = []
    position = 0
    text = text.strip() or "DEFAULT"
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise ListenerConfigError(f"ssl.principal.mapping.rules: invalid rule at {text[position:]!r}")
        position = match.end()
        if match.group(1):
            rules.append(MappingRule(None))
        else:
            # Java's $1 group references become Python's \g<1>.
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3))
            rules.append(MappingRule(re.compile(match.group(2)), replacement, match.group(4)))
    return tuple(rules)


def ssl_principal(der: bytes | None, rules: tuple[MappingRule, ...]) -> str | None:
    """"User:<name>" of a client certificate (User:ANONYMOUS without one); None if no rule maps its DN
    (Kafka then refuses the client)."""
    if der is None:
        return "User:ANONYMOUS"
    dn = distinguished_name(der)
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return f"User:{name}"
    return None


class _SSLProtocolClass(Protocol):
    """The constructor asyncio's and uvloop's SSLProtocol share."""

    def __call__(self, loop: asyncio.AbstractEventLoop, app_protocol: asyncio.BaseProtocol,
                 sslcontext: ssl.SSLContext, waiter: asyncio.Future[None], *, server_side: bool,
                 call_connection_made: bool, ssl_handshake_timeout: float | None) -> asyncio.BufferedProtocol: ...


def _ssl_protocol_class(loop: asyncio.AbstractEventLoop) -> _SSLProtocolClass:
    """The TLS protocol the loop's own servers use (uvloop's, else asyncio's): same constructor."""
    try:
        import uvloop.loop
    except ImportError:  # (uvloop is not installed on every platform)
        pass
    else:
        if isinstance(loop, uvloop.loop.Loop):
            return cast(_SSLProtocolClass, uvloop.loop.SSLProtocol)
    return cast(_SSLProtocolClass, asyncio.sslproto.SSLProtocol)


def server_tls_protocol(loop: asyncio.AbstractEventLoop, app_protocol: asyncio.BaseProtocol, context: ssl.SSLContext,
                        waiter: asyncio.Future[None], *, handshake_timeout_s: float | None) -> asyncio.BufferedProtocol:
    """The server side of TLS between a connection's socket transport and `app_protocol`, as the loop's own
    TLS servers make it: the caller sets it as the transport's protocol and calls its connection_made; it
    calls app_protocol.connection_made with its transport once the handshake is done, and ends `waiter`
    (with the error if the handshake failed)."""
    return _ssl_protocol_class(loop)(loop, app_protocol, context, waiter, server_side=True, call_connection_made=True,
                                     ssl_handshake_timeout=handshake_timeout_s)
