"""AWS for mmsctl, in layers: ``aws`` (plumbing, the only boto3) < ``instance`` (what an EC2 server
boots) < the products ``ec2``, ``fleet`` and ``function`` (Lambda), which never import each other
(``tests/test_layers.py`` checks). Each product has the same shape: spec, create/deploy, query, destroy.
"""
