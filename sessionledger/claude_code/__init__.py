"""Claude Code as a host (CC-1 … CC-10): its hooks and its transcripts, recorded in the ledger.

:mod:`.observations` is the one vocabulary both sources are read into; :mod:`.recorder`
appends what they say; :mod:`.hooks` answers Claude Code's hook events (``POST
/v1/hooks/claude-code`` and ``sessionledger hook claude-code``) and :mod:`.transcripts` imports
its JSONL transcripts (``sessionledger import claude-code``).
"""
