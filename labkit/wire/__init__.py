"""The kernel⇄rank contract: the messages and their records, the channel that carries them, the job a rank
is given, the environment variables, the typed errors, and which device a rank binds.

Both sides import this package; it imports nothing of labkit but the base (``i18n``, ``fmt``), and no torch.
"""
