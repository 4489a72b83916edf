"""pmubuild.guests: cpio, QEMU's console, the guest parts, matrix and debug runs."""
