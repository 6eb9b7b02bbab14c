"""``mms.utils``: helpers of MMS's legacy services."""
