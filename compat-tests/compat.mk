# Installs what compat tests need (included by the top-level Makefile; run from the repo root).
# The reference Kafka's version is compat-tests/KAFKA_VERSION, the one line an upgrade changes: the poms take it
# as -Dkafka.version, oracle_fixture.py reads it, and the stamps below name it.
# Every target is idempotent and returns at once when its stamp is newer than its inputs:
#   - the reference Apache Kafka's jars from Maven Central -> compat-tests/oracle/lib
#   - kcat (Debian package), only if `kcat` is not on PATH
#   - prometheus (Debian package), only if `prometheus` is not on PATH (compat-tests/test_metrics.py)
#   - kafkajs (npm, pinned by compat-tests/node/package-lock.json) -> compat-tests/node/node_modules
#   - the Java client scenario (kafka-clients via Maven) -> compat-tests/java/target
#   - Kafka Connect (connect-runtime, connect-json via Maven) -> compat-tests/connect/lib, and the test's own
#     connector plugin (compat-tests/connect/plugin, compiled against that Connect API) -> lib/plugins/samsa-line-file
#   - franz-go (Go module proxy, pinned by compat-tests/go/go.sum) -> compat-tests/go/bin (KIP-848 member)
COMPAT_DIR := compat-tests
COMPAT_MVN := mvn -q -B
COMPAT_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
KAFKA_VERSION_FILE := $(COMPAT_DIR)/KAFKA_VERSION
KAFKA_VERSION := $(strip $(file < $(KAFKA_VERSION_FILE)))
# Kafka Connect's version for test_kafka_connect.py (a client of the broker under test): the reference's. Kafka's
# FileStream plugin (connect-file) is not served at 4.4.0 and 4.3.1's does not load in a 4.4 worker (kafka-clients 4.4
# moved AppInfoParser), so the test runs its own line-file connectors, compiled here against the worker's API.
CONNECT_VERSION := $(KAFKA_VERSION)
CONNECT_PLUGIN_DIR := $(COMPAT_DIR)/connect/plugin
FETCH_KAFKA_JARS := $(COMPAT_DIR)/fetch-kafka-jars.sh
ORACLE_LIB := $(COMPAT_DIR)/oracle/lib
ORACLE_STAMP := $(ORACLE_LIB)/.stamp-kafka-$(KAFKA_VERSION)
NODE_STAMP := $(COMPAT_DIR)/node/node_modules/.stamp
JAVA_STAMP := $(COMPAT_DIR)/java/target/.stamp-kafka-$(KAFKA_VERSION)
CONNECT_LIB := $(COMPAT_DIR)/connect/lib
CONNECT_STAMP := $(CONNECT_LIB)/.stamp-connect-$(CONNECT_VERSION)

.PHONY: compat-deps compat-oracle compat-kcat compat-prometheus compat-node compat-java compat-connect compat-go

compat-deps: compat-oracle compat-kcat compat-prometheus compat-node compat-java compat-connect compat-go

compat-oracle: $(ORACLE_STAMP)

# Downloaded into lib.tmp and renamed, so an interrupted download never looks complete.
$(ORACLE_STAMP): $(COMPAT_DIR)/oracle/pom.xml $(KAFKA_VERSION_FILE) $(FETCH_KAFKA_JARS)
	rm -rf $(ORACLE_LIB).tmp
	$(FETCH_KAFKA_JARS) $(COMPAT_DIR)/oracle $(ORACLE_LIB).tmp
	rm -rf $(ORACLE_LIB) && mv $(ORACLE_LIB).tmp $(ORACLE_LIB)
	touch $@

compat-kcat:
	@command -v kcat >/dev/null 2>&1 || { \
	  $(COMPAT_SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(COMPAT_SUDO) apt-get install -y -q kcat; }

# A real Prometheus scrapes Samsa in compat-tests/test_metrics.py (--no-install-recommends: the server only).
compat-prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
	  $(COMPAT_SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(COMPAT_SUDO) apt-get install -y -q --no-install-recommends prometheus; }

compat-node: $(NODE_STAMP)

$(NODE_STAMP): $(COMPAT_DIR)/node/package.json $(COMPAT_DIR)/node/package-lock.json
	cd $(COMPAT_DIR)/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

compat-java: $(JAVA_STAMP)

# target/lib is emptied first: copy-dependencies adds, so an upgrade would leave the old kafka-clients beside the new.
$(JAVA_STAMP): $(COMPAT_DIR)/java/pom.xml $(KAFKA_VERSION_FILE) $(wildcard $(COMPAT_DIR)/java/src/main/java/*.java)
	rm -rf $(COMPAT_DIR)/java/target/lib
	cd $(COMPAT_DIR)/java && $(COMPAT_MVN) package dependency:copy-dependencies -Dkafka.version=$(KAFKA_VERSION) \
	  -DincludeScope=runtime -DoutputDirectory=target/lib
	touch $@

compat-connect: $(CONNECT_STAMP)

# Downloaded into lib.tmp and renamed, so an interrupted download never looks complete. The plugin jar goes to
# lib/plugins/samsa-line-file: the worker loads it through plugin.path (its own class loader), as a deployed connector
# is, while the runtime's classpath is lib/* alone.
$(CONNECT_STAMP): $(COMPAT_DIR)/connect/pom.xml $(KAFKA_VERSION_FILE) $(FETCH_KAFKA_JARS) \
                  $(wildcard $(CONNECT_PLUGIN_DIR)/src/samsa/connect/*.java $(CONNECT_PLUGIN_DIR)/META-INF/services/*)
	rm -rf $(CONNECT_LIB).tmp $(CONNECT_PLUGIN_DIR)/classes
	$(FETCH_KAFKA_JARS) $(COMPAT_DIR)/connect $(CONNECT_LIB).tmp $(CONNECT_VERSION)
	mkdir -p $(CONNECT_LIB).tmp/plugins/samsa-line-file $(CONNECT_PLUGIN_DIR)/classes
	javac --release 17 -nowarn -cp '$(CONNECT_LIB).tmp/*' -d $(CONNECT_PLUGIN_DIR)/classes \
	  $(CONNECT_PLUGIN_DIR)/src/samsa/connect/*.java
	cp -r $(CONNECT_PLUGIN_DIR)/META-INF $(CONNECT_PLUGIN_DIR)/classes/
	jar cf $(CONNECT_LIB).tmp/plugins/samsa-line-file/samsa-line-file.jar -C $(CONNECT_PLUGIN_DIR)/classes .
	rm -rf $(CONNECT_PLUGIN_DIR)/classes $(CONNECT_LIB) && mv $(CONNECT_LIB).tmp $(CONNECT_LIB)
	touch $@

# franz-go's KIP-848 member (compat-tests/kip848/test_franz_consumer_protocol.py), built when Go is installed.
GO_STAMP := $(COMPAT_DIR)/go/bin/.stamp

compat-go: $(GO_STAMP)

$(GO_STAMP): $(COMPAT_DIR)/go/go.mod $(COMPAT_DIR)/go/go.sum $(wildcard $(COMPAT_DIR)/go/*/*.go)
	@if command -v go >/dev/null 2>&1; then \
	  cd $(COMPAT_DIR)/go && go build -o bin/kip848member ./kip848member && touch bin/.stamp; \
	else echo "go not installed: the franz-go KIP-848 tests will be skipped"; fi
