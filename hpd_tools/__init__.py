"""Front doors and measuring on the engine's public API: hpd-parse, hpd-serve, the remote client, hpd-bench, hpd-eval."""
