"""The core's records and rules: configuration, records, errors, token counting, the budget
ledger, sentence splitting. Imports nothing else from meve; loads no model and opens no store."""
