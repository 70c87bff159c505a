"""Training of the bundled model on synthetic and real pages (GPU), in stages.

    python -m hpd_training.train --out runs/x --stages one:180,few:180,dense:240 [--init assets/hpd-tiny]
    python -m hpd_training.train --out runs/x --init runs/x/hpd-tiny --stages mtp:120
    python -m hpd_training.train.widen --out runs/w0     # the one-tile weights in the four-tile layout
    python -m hpd_training.train --out runs/y --init runs/w0/hpd-tiny --stages real:450 \
        --real-source hpd_training.bundle:source --real-data data/texlive-train

Each page is packed as one sequence: prompt, layout branch, then every content branch with the
positions it has at inference (a child's `<CHILD>` sits at its fork position p) and a tree
mask (a child sees the prompt, the layout branch before its `<FORK>`, and itself), so that one
forward trains the layout branch and all its children. `docs/training.md` has the recipe.
"""
