package samsa.connect;

import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;

/** Reads a text file line by line into a topic ("file", "topic"); one task. The test connector of
 * compat-tests/test_kafka_connect.py, built against the Connect API of the worker it runs in. */
public class LineFileSourceConnector extends SourceConnector {
    static final ConfigDef CONFIG = new ConfigDef()
        .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file to read")
        .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic to write");
    private Map<String, String> props;

    @Override public String version() { return "1.0"; }
    @Override public void start(Map<String, String> props) {
        CONFIG.parse(props);  // both settings present, or the connector fails with ConfigException
        this.props = Map.copyOf(props);
    }
    @Override public Class<? extends Task> taskClass() { return LineFileSourceTask.class; }
    @Override public List<Map<String, String>> taskConfigs(int maxTasks) { return List.of(props); }
    @Override public void stop() { }
    @Override public ConfigDef config() { return CONFIG; }
}
