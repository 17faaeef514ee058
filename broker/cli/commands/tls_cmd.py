"""`samsa tls ca|issue`: a test certificate authority and certificates signed by it (broker/security/dev_ca.py),
so a TLS listener can be tried without openssl steps. For tests and trials, not production."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from samsa.broker.cli.commands.errors import CliError, guarded


@guarded
def cmd_tls(args: argparse.Namespace) -> int:
    from samsa.broker.security.dev_ca import issue, make_ca

    directory = Path(args.directory)
    if args.tls_command == "ca":
        if (directory / "ca.pem").exists() and not args.force:
            raise CliError(f"{directory / 'ca.pem'} exists; --force makes a new CA (certificates it signed stop "
                           "being trusted)")
        print(f"CA certificate: {make_ca(directory, args.cn)} (ssl.truststore.location, ssl.truststore.type=PEM)")
        return 0
    if not (directory / "ca.key").exists():
        raise CliError(f"no CA in {directory}: run `samsa tls ca {directory}` first")
    files = issue(directory, args.name, args.cn or args.name, organization=args.organization,
                  hosts=tuple(args.host or ("localhost", "127.0.0.1")), pkcs12_password=args.pkcs12_password)
    print(f"key and certificate: {files.key_and_chain} (ssl.keystore.location, ssl.keystore.type=PEM)")
    print(f"separately: {files.key} and {files.certificate}; PKCS12: {files.pkcs12}")
    return 0


def add_commands(sub: Any, one_line: Any) -> None:
    tls = one_line(sub.add_parser("tls", help="make a test CA and certificates for TLS listeners and clients"))
    actions = tls.add_subparsers(dest="tls_command", required=True)
    p = one_line(actions.add_parser("ca", help="create DIRECTORY/ca.pem and ca.key"))
    p.add_argument("directory", metavar="DIRECTORY")
    p.add_argument("--cn", default="Samsa Test CA", help="the CA's common name")
    p.add_argument("--force", action="store_true", help="replace an existing CA")
    p.set_defaults(func=cmd_tls)
    p = one_line(actions.add_parser("issue", help="a key and certificate NAME.pem signed by DIRECTORY's CA"))
    p.add_argument("directory", metavar="DIRECTORY")
    p.add_argument("name", metavar="NAME", help="file name stem (NAME.pem, NAME.key, NAME.crt, NAME.p12)")
    p.add_argument("--cn", default=None, help="the subject's common name (default NAME); a client's principal is "
                                              "User:CN=<cn>[,O=<organization>]")
    p.add_argument("--organization", "-O", default=None, help="the subject's organization (O=)")
    p.add_argument("--host", action="append", help="a DNS name or IP the certificate is valid for (repeatable; "
                                                   "default localhost and 127.0.0.1)")
    p.add_argument("--pkcs12-password", default="changeit", help="the PKCS12 file's password (default changeit)")
    p.set_defaults(func=cmd_tls)
