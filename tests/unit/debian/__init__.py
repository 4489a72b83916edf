"""pmubuild.debian and debian/: the packages, their test's stages, dkms.conf."""
