"""moto's S3 server with a request journal that survives concurrent requests.

moto's recorder (switched on with POST /moto-api/recorder/start-recording) appends each request,
before handling it, to MOTO_RECORDER_FILEPATH, and POST /moto-api/recorder/replay-recording
sends the journal to a fresh process: together they give moto the durable state it otherwise
lacks, so tests/spark/run.sh can crash the S3 server and start it again. moto's server is
threaded and its recorder appends a record and its newline with separate writes, so two large
PUTs at once interleave; this wrapper serialises the appends and then runs moto_server with the
same arguments.
"""

import threading

from moto.moto_api._internal.recorder.models import Recorder
from moto.server import main

_append = threading.Lock()
_record = Recorder._record_request


def _record_serialised(self, request, body=None):
    with _append:
        _record(self, request, body)


Recorder._record_request = _record_serialised

if __name__ == "__main__":
    main()
