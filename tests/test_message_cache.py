"""No element is sent to the browser as a reference to its cache (``.streamlit/config.toml``).

Streamlit 1.67 drops a fragment's queued messages when the fragment runs again before they were
flushed, but keeps the reference messages among them; the browser then places a cached chart
under a container it never received and the page goes blank ("'setIn' cannot be called on an
ElementNode"): the live Flow view under load, about one run in ten of
``tests/test_browser_run_length.py``. The served configuration makes no message cacheable.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from streamlit import config
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.forward_msg_cache import create_reference_msg, populate_hash_if_needed
from streamlit.runtime.forward_msg_queue import ForwardMsgQueue

SERVED = Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml"
FRAGMENT = "live-view"


def _chart(path: list[int], size: int = 100_000) -> ForwardMsg:
    """A large element of the fragment's at ``path`` (a chart's worth of bytes)."""
    msg = ForwardMsg()
    msg.metadata.delta_path[:] = path
    msg.delta.fragment_id = FRAGMENT
    msg.delta.new_element.markdown.body = "x" * size
    return msg


def _block(path: list[int]) -> ForwardMsg:
    msg = ForwardMsg()
    msg.metadata.delta_path[:] = path
    msg.delta.fragment_id = FRAGMENT
    msg.delta.add_block.vertical.SetInParent()
    return msg


@pytest.fixture
def min_cached_size():
    """Set ``global.minCachedMessageSize`` for one test, then put the previous value back."""
    before = config.get_option("global.minCachedMessageSize")
    yield lambda value: config.set_option("global.minCachedMessageSize", value)
    config.set_option("global.minCachedMessageSize", before)


def test_streamlit_keeps_a_fragments_reference_messages_when_it_drops_their_containers():
    """Why the setting exists: when this starts failing, Streamlit no longer orphans references
    and caching can come back."""
    queue = ForwardMsgQueue()
    chart = _chart([0, 5, 0, 3, 1, 0])
    populate_hash_if_needed(chart)
    queue.enqueue(_block([0, 5, 0, 3]))
    queue.enqueue(create_reference_msg(chart))
    queue.clear(retain_lifecycle_msgs=True, fragment_ids_this_run=[FRAGMENT])  # it runs again
    kept = [msg.WhichOneof("type") for msg in queue.flush()]
    assert kept == ["ref_hash"]  # the container is gone, the reference into it is not


def test_the_served_configuration_makes_no_element_cacheable(min_cached_size):
    served = tomllib.loads(SERVED.read_text())["global"]["minCachedMessageSize"]
    min_cached_size(served)
    chart = _chart([0, 1], size=1_000_000)  # a large chart
    populate_hash_if_needed(chart)
    assert not chart.metadata.cacheable


def test_streamlits_default_would_cache_the_same_element(min_cached_size):
    """The test above can fail: with Streamlit's default, the element is cacheable."""
    min_cached_size(config.get_config_options()["global.minCachedMessageSize"].default_val)
    chart = _chart([0, 1], size=1_000_000)
    populate_hash_if_needed(chart)
    assert chart.metadata.cacheable
