#!/usr/bin/env bash
# fetch-kafka-jars.sh POM_DIR OUT_DIR [VERSION]: the jars of POM_DIR/pom.xml at the reference Kafka version (or
# VERSION) into OUT_DIR, from Maven Central. The version is compat-tests/KAFKA_VERSION, the one line an
# upgrade changes: the poms take it as -Dkafka.version and pin nothing else (Kafka's published POMs name the
# versions its release build ships, checked against its LICENSE-binary in oracle/NOTES.md).
#
# Kafka logs through SLF4J 1.7 bound to Log4j2 by log4j-slf4j-impl, a jar its distribution ships but no POM of
# Kafka names (and Connect's POMs name no Log4j2 at all). So log4j-api, log4j-core and log4j-slf4j-impl are
# copied at the Log4j2 version kafka-server's POM names, the one the distribution ships.
set -euo pipefail
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 POM_DIR OUT_DIR [VERSION]" >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)"
version="${3:-$(tr -d '[:space:]' < "$here/KAFKA_VERSION")}"
out="$(realpath -m "$2")"  # Maven takes a relative outputDirectory from the pom's folder
mvn=(mvn -q -B -f "$1/pom.xml" -Dkafka.version="$version")
"${mvn[@]}" dependency:copy-dependencies -DoutputDirectory="$out"

poms="$(mktemp -d)"
trap 'rm -rf "$poms"' EXIT
"${mvn[@]}" dependency:copy -Dartifact="org.apache.kafka:kafka-server:$version:pom" -DoutputDirectory="$poms"
log4j="$(python3 - "$poms/kafka-server-$version.pom" <<'PY'
import sys
import xml.etree.ElementTree as ET
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
for dep in ET.parse(sys.argv[1]).getroot().iterfind("m:dependencies/m:dependency", ns):
    if dep.findtext("m:artifactId", namespaces=ns) == "log4j-core":
        print(dep.findtext("m:version", namespaces=ns))
PY
)"
[ -n "$log4j" ] || { echo "$0: kafka-server $version's POM names no log4j-core" >&2; exit 1; }
for artifact in log4j-api log4j-core log4j-slf4j-impl; do
  "${mvn[@]}" dependency:copy -Dartifact="org.apache.logging.log4j:$artifact:$log4j" -DoutputDirectory="$out"
done
