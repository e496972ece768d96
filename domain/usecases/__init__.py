"""The use cases, by context; each class takes what it needs at construction (domain/application.py
builds them all):

- operators.py: workspaces, API clients and their keys, the SMS switch, opt-outs by an operator
- sims.py: the SIM pool, as operators and the dispatcher change it
- sending.py: a send, a batch, a scheduled message released, a cancel
- otp.py: a one-time password sent and checked
- dispatch.py: a message submitted to a SIM and its reports, replies and opt-outs by reply
- webhooks.py: webhook deliveries, their attempts, a redelivery
- history.py: a message's life, the audit trail
- log.py: the event log they all read and append to
"""
