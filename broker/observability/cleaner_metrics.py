"""Scrape-time families of the log cleaner (broker.log_cleaner.LogCleaner's figures): Kafka's
kafka.log:type=LogCleaner and type=LogCleanerManager gauges as the JMX exporter names them, and the bytes
cleaned and cleanings as counters (samsa_*: Kafka only logs them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from samsa.broker.observability.series import Family

if TYPE_CHECKING:
    from samsa.broker.observability.observed_broker import ObservabilityBroker


class CleanerCollector:
    """A SteppedCollector (collectors.py): a few families, read at once (the uncleanable bytes walk only
    the logs marked uncleanable)."""

    def __init__(self, broker: ObservabilityBroker) -> None:
        self._broker = broker

    def steps(self) -> Iterator[Family | None]:
        cleaner = self._broker.log_cleaner
        figures = cleaner.figures
        now_ms = int(time.time() * 1000)

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=value)

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            return CounterMetricFamily(name, doc, value=value)

        yield gauge("kafka_log_logcleaner_cleaner_recopy_percent",
                    "Bytes written over bytes read by the cleaner threads' last cleanings, in percent.",
                    figures.recopy_percent)
        yield gauge("kafka_log_logcleaner_max_clean_time_secs",
                    "The longest of the cleaner threads' last cleanings, in seconds.", figures.max_clean_time_s)
        yield gauge("kafka_log_logcleaner_max_buffer_utilization_percent",
                    "How full the fullest offset map of the threads' last cleanings was, in percent.",
                    figures.max_buffer_utilization_percent)
        yield gauge("kafka_log_logcleaner_time_since_last_run_ms",
                    "Milliseconds since the cleaner last looked for a log to clean (0 before it has).",
                    max(0, now_ms - figures.last_run_ms) if figures.last_run_ms >= 0 else 0)
        yield gauge("kafka_log_logcleanermanager_max_dirty_percent",
                    "The highest dirty ratio of the compacted logs at the last pick, in percent.",
                    100 * figures.max_dirty_ratio)
        log_dir = str(self._broker.log_manager.data_dir.resolve())
        count = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_partitions_count",
                                  "Logs marked uncleanable (a corrupt batch), not cleaned until restart.",
                                  labels=["log_dir"])
        count.add_metric([log_dir], len(cleaner.uncleanable))
        uncleanable = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_bytes",
                                        "Dirty bytes of the logs marked uncleanable.", labels=["log_dir"])
        uncleanable.add_metric([log_dir], cleaner.uncleanable_bytes(now_ms))
        yield from (count, uncleanable)
        yield counter("samsa_log_cleaner_cleaned_bytes", "Bytes of segments the cleaner has read and recopied.",
                      figures.bytes_read)
        yield counter("samsa_log_cleaner_written_bytes", "Bytes the cleaner has written into cleaned segments.",
                      figures.bytes_written)
        yield counter("samsa_log_cleaner_cleanings", "Cleanings completed.", figures.cleanings)
