"""What an EC2 model-server instance boots, shared by ``ec2 launch`` and a fleet's launch template.

    accelerators.py  Elastic Inference sizes and today's accelerator instance families
    ami.py           the AMI (SSM parameter, name search or --ami)
    ei.py            the Elastic Inference endpoint, group and role (and which fleets use them)
    server_image.py  AMI + instance type + user data for one server, as both products launch it
    userdata.py      the boot script (``userdata.sh``) that installs and starts the server under systemd
    tunnels.py       ssh / Session Manager port forwarding to instances' private APIs; ssh config entries
"""
