"""Regenerate ``samsa.kproto.schema``: kio's own code generator run on a newer Kafka's JSON schemas.

A developer tool, never imported by the broker.  kio (our protocol library) generates its schema
classes from Kafka's ``clients/src/main/resources/common/message/*.json``; the newest kio on PyPI
(0.6.5) was generated from Kafka 4.1, so it lacks what Kafka added since.  This script runs kio's
generator (``codegen/`` of a kio checkout: it is not in kio's sdist or wheel) on the JSON files that
``kafka-clients-<version>.jar`` carries, and keeps only the (API, version) modules the installed kio
does not have.  Nothing is written by hand.

Two adjustments are made to the generator, both to reproduce what kio 0.6.5 itself ships (the
checkout we have predates that release): ``TaskOffsetIntervalMs`` is a timedelta field, and a
nullable common-struct field is ``Struct | None`` with its default.  With them, regenerating every
module from Kafka 4.4.0's JSON reproduces kio 0.6.5's files byte for byte, except where Kafka's JSON
itself changed after 4.1 (renamed or re-documented fields of TxnOffsetCommit v3-5 and
StreamsGroupHeartbeat v0, same wire format) and the share-group responses the generator cannot read.
``--check`` prints that comparison.

Kafka's group coordinator records (``coordinator-key`` / ``coordinator-value`` schemas in
``kafka-group-coordinator-<version>.jar``) are generated too, read as kio ``data`` schemas, for the
names ``--records`` selects: Samsa writes streams groups to ``__consumer_offsets`` with them.

    python -m samsa.kproto.schema.regenerate --kio-src ~/src/kio \\
        --jar compat-tests/oracle/lib/kafka-clients-4.4.0.jar \\
        --jar compat-tests/oracle/lib/kafka-group-coordinator-4.4.0.jar --records 'StreamsGroup*' [--check]

Then update ``EXTRA_SCHEMAS`` in ``__init__.py`` if the set of modules changed.
"""

from __future__ import annotations

import argparse
import filecmp
import fnmatch
import json
import re
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

import kio

_HERE = pathlib.Path(__file__).parent
_KIO_SCHEMA = pathlib.Path(kio.__file__).parent / "schema"
_PATCHES = (
    (
        "codegen/parser.py",
        '        "PushIntervalMs",\n',
        '        "PushIntervalMs",\n        "TaskOffsetIntervalMs",\n',
    ),
    (
        "codegen/generate_schema.py",
        "        default=None,\n        optional=field.is_nullable_for_version(version),\n",
        "        default=field.default,\n        optional=field.is_nullable_for_version(version),\n",
    ),
    (
        "codegen/generate_schema.py",
        '    return f"    {to_snake_case(field.name)}: {field.type.struct.name}{field_call}\\n"',
        '    suffix = " | None" if field.is_nullable_for_version(version) else ""\n'
        '    return f"    {to_snake_case(field.name)}: {field.type.struct.name}{suffix}{field_call}\\n"',
    ),
)
_DRIVER = """
import pathlib, shutil, sys
import codegen.generate_schema as g
from codegen.parser import parse_file
readable = pathlib.Path("schema/readable")
readable.mkdir(parents=True)
for path in sorted(pathlib.Path("schema/all").glob("*.json")):
    try:
        parse_file(path)
    except Exception:
        print("unreadable:", path.name, file=sys.stderr)
        continue
    shutil.copy(path, readable)
pathlib.Path("src/kio/schema").mkdir(parents=True)
g.build_tag = "readable"
g.main()
"""


def _is_selected_record(text: str, patterns: list[str]) -> bool:
    schema = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))
    return schema.get("type") in ("coordinator-key", "coordinator-value") and any(
        fnmatch.fnmatch(schema["name"], pattern) for pattern in patterns
    )


def _generate(kio_src: pathlib.Path, jars: list[pathlib.Path], records: list[str], work: pathlib.Path) -> pathlib.Path:
    shutil.copytree(kio_src / "codegen", work / "codegen")
    shutil.copy(kio_src / "pyproject.toml", work / "pyproject.toml")
    for name, old, new in _PATCHES:
        path = work / name
        text = path.read_text()
        if old not in text:
            sys.exit(f"{name}: the generator changed; check the adjustment {old!r}")
        path.write_text(text.replace(old, new))
    (work / "schema" / "all").mkdir(parents=True)
    for jar in jars:
        with zipfile.ZipFile(jar) as archive:
            for member in archive.namelist():
                if member.startswith("common/message/") and member.endswith(".json"):
                    text = archive.read(member).decode()
                    if _is_selected_record(text, records):
                        text = re.sub(r'"type": "coordinator-(key|value)"', '"type": "data"', text)
                    (work / "schema" / "all" / pathlib.Path(member).name).write_text(text)
    # kio's generator needs pydantic 1; the caller's interpreter must have it (pip install 'pydantic<2').
    subprocess.run([sys.executable, "-c", _DRIVER], cwd=work, check=True, stdout=subprocess.DEVNULL)
    out = work / "src" / "kio" / "schema"
    for args in (["check", "--fix", "--exit-zero", "-q"], ["format", "-q"], ["check", "--fix", "--exit-zero", "-q"]):
        subprocess.run(["ruff", *args, "--config", str(work / "pyproject.toml"), str(out)], check=True)
    return out


def _snake_pattern(pattern: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", pattern).lower()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kio-src", type=pathlib.Path, required=True)
    parser.add_argument("--jar", type=pathlib.Path, action="append", required=True)
    parser.add_argument("--records", action="append", default=[], help="coordinator record names (glob)")
    parser.add_argument("--check", action="store_true", help="list generated modules that differ from kio's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = _generate(args.kio_src, args.jar, args.records, pathlib.Path(tmp))
        for version_dir in sorted(out.glob("*/v*")):
            relative = version_dir.relative_to(out)
            ours = _HERE / relative
            if (_KIO_SCHEMA / relative).exists():
                if args.check:
                    for module in sorted(version_dir.glob("*.py")):
                        theirs = _KIO_SCHEMA / relative / module.name
                        if not filecmp.cmp(module, theirs, shallow=False):
                            print("differs from kio:", relative / module.name)
                continue
            is_api = (version_dir / "request.py").exists()
            is_record = (version_dir / "data.py").exists() and any(
                fnmatch.fnmatch(relative.parts[0], _snake_pattern(p)) for p in args.records
            )
            if not (is_api or is_record):
                continue  # other data types (e.g. AbortedTxn)
            if ours.exists():
                shutil.rmtree(ours)
            shutil.copytree(version_dir, ours)
            if is_record:  # kio's generator names the clients module as every schema's source
                for module in ours.glob("*.py"):
                    text = module.read_text().replace("``clients/src/", "``group-coordinator/src/")
                    module.write_text(text)
            (ours.parent / "__init__.py").touch()
            print("written:", relative)


if __name__ == "__main__":
    main()
