"""Tools for developers and demos: the modem emulator and its profiles, the example webhook
receiver, the dashboard screenshots, the event-record check and the corpus of old releases' logs."""
