"""Custody of the evidence: how old each source was when the agent used it, and the operator's freshness rules.

Beyond the paper. Every source carries its evidence envelope (``estimator.corpus.envelope``: tool, server,
resource, when it was observed, for whom, its digest and transformations, custody). Here, zero model calls:

- ``ages`` — when the answer and each action were produced, and each source's age at that moment (None and
  ``not recorded`` when either time is missing: never guessed);
- ``freshness`` — the operator's rules ("a ``send_money`` call needs evidence from ``get_balance`` no older than
  30 s, from the same principal, with no lossy transformation"), read from a policy (TOML or JSON) and checked
  over an action's context; a breach is a finding naming the rule, the source and its age.
"""
