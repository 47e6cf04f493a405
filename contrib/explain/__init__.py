"""``opcheck explain``: a torch_npu / CANN runtime log → each failure once, what it means and
what to change. One room per step:

``reader`` (bytes → records) → ``records`` (a record → findings) and ``templates`` (a line →
its message template) → ``scan`` (one pass: findings, signatures, products) → ``diagnose``
(findings → problems, with ``codes`` (code tables and rules), ``signatures`` and ``facts``
(what the catalog says)) → ``sites`` (the advice writer: the site that printed it and what to
change) → ``report`` (the ops' status on the target) → ``render`` (the terminal text).
"""
