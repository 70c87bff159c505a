"""The Gradio app for HPD-Parsing: `build_demo(engine)`, and `launch` it (`hpd-demo`, `python -m app`)."""
