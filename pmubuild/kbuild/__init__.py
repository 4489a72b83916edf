"""What the DKMS package ships (debian/rules installs these files, flat, into
/usr/src/simple-pmu-VERSION/pmubuild/): kbuildfiles reads a kernel tree, compat probes it
and renders compat.h from compat.h.j2, modverify checks a built module against it.

Each is also a plain script for /usr/bin/python3 with only jinja2 and pyelftools: they
import only each other (a sibling import falls back to `from kbuildfiles import`) and never
the rest of pmubuild. This __init__ is not shipped."""
