"""Course material built from the book: the student edition (``make student``)."""
