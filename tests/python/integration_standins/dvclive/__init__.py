"""A stand-in for dvclive (the real package brings DVC, whose installation would also switch on the
reference package's own DVC logging in every test that trains it): Live and its calls recorded."""
from recorder import Recorder, record


class Live(Recorder):
    def __init__(self, **kwargs):
        super().__init__("dvclive", "live")
        record("dvclive", "Live", **kwargs)
