"""Reads event files with TensorBoard's own readers and prints what TensorBoard would show, as JSON.

Usage: python read_events.py PATH (a run's event folder, or one event file)

Two readers: the record reader (strict: a bad CRC or a torn record is an error here, where
TensorBoard would silently stop reading the file), and the plugin event accumulator TensorBoard's
backend uses, which turns simple_value scalars into the scalars plugin's tensors and files the text
summaries under the text plugin. Test-only (tblog's python_test.go); needs tensorboard, not
TensorFlow.
"""
import glob
import json
import os
import sys

from tensorboard.backend.event_processing import plugin_event_accumulator as pea
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
from tensorboard.util import tensor_util


def strict_records(path):
    reader = PyRecordReader_New(path)
    out = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return out
        ev = event_pb2.Event()
        ev.ParseFromString(reader.record())
        out.append(ev)


def main(path):
    files = [path] if os.path.isfile(path) else sorted(glob.glob(os.path.join(path, "*tfevents*")))
    report = {"files": {}, "scalars": {}, "text": {}, "plugins": {}}
    for f in files:
        evs = strict_records(f)
        report["files"][os.path.basename(f)] = {
            "records": len(evs),
            "file_version": evs[0].file_version if evs else None,
        }
    acc = pea.EventAccumulator(path, size_guidance=pea.STORE_EVERYTHING_SIZE_GUIDANCE)
    acc.Reload()
    for plugin in ("scalars", "text"):
        report["plugins"][plugin] = sorted(acc.PluginTagToContent(plugin).keys()) if plugin in acc.ActivePlugins() else []
    for tag in report["plugins"]["scalars"]:
        # float() of the float32 the file holds: exact, and JSON carries a double exactly.
        report["scalars"][tag] = [[t.step, float(tensor_util.make_ndarray(t.tensor_proto).item())] for t in acc.Tensors(tag)]
    for tag in report["plugins"]["text"]:
        report["text"][tag] = [[t.step, tensor_util.make_ndarray(t.tensor_proto).item().decode("utf-8")] for t in acc.Tensors(tag)]
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
