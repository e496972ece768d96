"""The use cases, by context; each class takes what it needs at construction (domain/application.py
builds them all), and each is a generator of steps or a plain blocking method (docs/design.md,
"Use cases"):

- operators.py: workspaces, API clients and their keys, the SMS switch, opt-outs by an operator
- sims.py: the SIM pool, as operators and the dispatcher change it
- sending.py: a send, a batch, a scheduled message released, a cancel
- otp.py: a one-time password sent and checked
- dispatch.py: a message submitted to a SIM and its reports, replies and opt-outs by reply
- webhooks.py: webhook deliveries, their attempts, a redelivery
- history.py: a message's life, the audit trail
- people.py: the dashboard's people, signing in, authentication codes
- campaigns.py: the dashboard's Send page (its hints, a preview, the campaign it sends) and a campaign canceled
- contacts.py: the dashboard's contact lists and message templates
- keys.py: secrets due for replacement after a leaked key
- log.py: the event log they all read and append to
"""
