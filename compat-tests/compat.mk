# Installs what compat tests need (included by the top-level Makefile; run from the repo root).
# Every target is idempotent and returns at once when its stamp is newer than its inputs:
#   - Apache Kafka 4.1.2 jars from Maven Central -> compat-tests/oracle/lib  (the reference broker)
#   - kcat (Debian package), only if `kcat` is not on PATH
#   - prometheus (Debian package), only if `prometheus` is not on PATH (compat-tests/test_metrics.py)
#   - kafkajs (npm, pinned by compat-tests/node/package-lock.json) -> compat-tests/node/node_modules
#   - the Java client scenario (kafka-clients 4.1.2 via Maven) -> compat-tests/java/target
#   - Kafka Connect 4.1.2 (connect-runtime, connect-json, connect-file via Maven) -> compat-tests/connect/lib
#   - franz-go (Go module proxy, pinned by compat-tests/go/go.sum) -> compat-tests/go/bin (KIP-848 member)
COMPAT_DIR := compat-tests
COMPAT_MVN := mvn -q -B
COMPAT_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ORACLE_LIB := $(COMPAT_DIR)/oracle/lib
ORACLE_STAMP := $(ORACLE_LIB)/.stamp-kafka-4.1.2
NODE_STAMP := $(COMPAT_DIR)/node/node_modules/.stamp
JAVA_STAMP := $(COMPAT_DIR)/java/target/.stamp
CONNECT_LIB := $(COMPAT_DIR)/connect/lib
CONNECT_STAMP := $(CONNECT_LIB)/.stamp-connect-4.1.2

.PHONY: compat-deps compat-oracle compat-kcat compat-prometheus compat-node compat-java compat-connect compat-go

compat-deps: compat-oracle compat-kcat compat-prometheus compat-node compat-java compat-connect compat-go

compat-oracle: $(ORACLE_STAMP)

# Downloaded into lib.tmp and renamed, so an interrupted download never looks complete.
$(ORACLE_STAMP): $(COMPAT_DIR)/oracle/pom.xml
	rm -rf $(ORACLE_LIB).tmp
	cd $(COMPAT_DIR)/oracle && $(COMPAT_MVN) dependency:copy-dependencies -DoutputDirectory=lib.tmp
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

$(JAVA_STAMP): $(COMPAT_DIR)/java/pom.xml $(wildcard $(COMPAT_DIR)/java/src/main/java/*.java)
	cd $(COMPAT_DIR)/java && $(COMPAT_MVN) package dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=target/lib
	touch $@

compat-connect: $(CONNECT_STAMP)

# Downloaded into lib.tmp and renamed, so an interrupted download never looks complete. connect-file
# goes to lib/plugins/connect-file: the worker loads it through plugin.path (its own class loader),
# as a deployed connector is, while the runtime's classpath is lib/* alone.
$(CONNECT_STAMP): $(COMPAT_DIR)/connect/pom.xml
	rm -rf $(CONNECT_LIB).tmp
	cd $(COMPAT_DIR)/connect && $(COMPAT_MVN) dependency:copy-dependencies -DoutputDirectory=lib.tmp
	mkdir -p $(CONNECT_LIB).tmp/plugins/connect-file
	mv $(CONNECT_LIB).tmp/connect-file-*.jar $(CONNECT_LIB).tmp/plugins/connect-file/
	rm -rf $(CONNECT_LIB) && mv $(CONNECT_LIB).tmp $(CONNECT_LIB)
	touch $@

# franz-go's KIP-848 member (compat-tests/kip848/test_franz_consumer_protocol.py), built when Go is installed.
GO_STAMP := $(COMPAT_DIR)/go/bin/.stamp

compat-go: $(GO_STAMP)

$(GO_STAMP): $(COMPAT_DIR)/go/go.mod $(COMPAT_DIR)/go/go.sum $(wildcard $(COMPAT_DIR)/go/*/*.go)
	@if command -v go >/dev/null 2>&1; then \
	  cd $(COMPAT_DIR)/go && go build -o bin/kip848member ./kip848member && touch bin/.stamp; \
	else echo "go not installed: the franz-go KIP-848 tests will be skipped"; fi
