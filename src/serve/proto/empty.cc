// Keeps sl_serve_proto a valid library before any .proto exists.
