"""Parses Prometheus text exposition on stdin with the Prometheus Python client's own parser
(prometheus_client.parser) and prints the families as JSON: [{"name", "type", "samples":
[{"name", "labels", "value"}]}]. The tests of nitro's /metrics endpoints (serve's and the
training exporter's) use it, so a format or type the reference parser reads otherwise fails them.
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families

families = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    families.append({
        "name": fam.name,
        "type": fam.type,
        "samples": [{"name": s.name, "labels": s.labels, "value": s.value if math.isfinite(s.value) else str(s.value)}
                    for s in fam.samples],
    })
print(json.dumps(families))
