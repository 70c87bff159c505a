"""Training the bundled model: synthetic pages (synth), the trainer (train). Not in the runtime wheel."""
