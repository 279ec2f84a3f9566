"""The append loop's per-batch hasher gives exactly the digest of ``envelope_hash`` (EL-4).

``session_hasher`` escapes the session id and the instant once per batch and pastes them into
a format string, so text that a format string or JSON would treat specially (``%``, quotes,
backslashes, control and non-ASCII characters) is what this property draws.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eventlog.encoding import envelope_hash, session_hasher

tricky = st.text(alphabet=st.sampled_from('%sd"\\\n\x00é✓ {}:,a'), max_size=12) | st.text()
optional = st.none() | tricky
hex_hash = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


@given(
    session_id=tricky, recorded_at=tricky,
    events=st.lists(
        st.tuples(hex_hash, st.integers(min_value=1), tricky, st.integers(min_value=0),
                  tricky, tricky, optional, optional),
        min_size=1, max_size=4,
    ),
)
def test_el4_session_hasher_equals_envelope_hash(
    session_id: str, recorded_at: str,
    events: list[tuple[str, int, str, int, str, str, str | None, str | None]],
) -> None:  # EL-4
    hasher = session_hasher(session_id, recorded_at)
    for prev, seq, event_type, version, data_json, actor, causation, correlation in events:
        assert hasher(prev, seq, event_type, version, data_json, actor, causation,
                      correlation) == envelope_hash(
            prev, session_id, seq, event_type, version, data_json, recorded_at, actor,
            causation, correlation,
        )
