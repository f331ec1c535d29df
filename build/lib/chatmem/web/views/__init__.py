"""The API's JSON shapes: what a response shows of each record, built in one place per idea."""
