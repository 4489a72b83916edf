"""What every part uses: the error a user can fix (errors), progress lines (progress), the
seed documents' tcyc.c (seeds). Imports nothing else of pmubuild."""
