. /tests/lib.sh
kernel_log_clean
echo "no WARNING, BUG or Oops in the kernel log"
