"""pmubuild.kbuild: compat and modverify on hand-made and real-looking trees."""
