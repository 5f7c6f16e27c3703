"""The sizes every producer of commands must keep to: the engine refuses a larger command
or payload (Limits in `engine/processing.py` starts from these), and clients check them
before sending, so a too-large value is refused with the same words, not by the broker."""

#: A command as it lies on the log.
MAX_COMMAND_BYTES = 512 * 1024
#: One payload inside a command: an input, a result, a memo.
MAX_PAYLOAD_BYTES = 256 * 1024
