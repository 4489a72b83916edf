"""The Debian packages: built in a clean chroot and checked with lintian (package), and
installed, upgraded and removed end to end (pkgtest, with its stages in pkgtest.sh)."""
