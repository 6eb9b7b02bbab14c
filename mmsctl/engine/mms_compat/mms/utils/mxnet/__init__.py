"""``mms.utils.mxnet``: MXNet helpers of MMS's legacy services (images, arrays, sentences)."""
