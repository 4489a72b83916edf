"""The module from a checkout: built for a tree (build), signed (signing), and
checkpatch.pl run over the drivers (checkpatch)."""
