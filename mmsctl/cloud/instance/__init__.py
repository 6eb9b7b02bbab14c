"""What an EC2 model-server instance boots, shared by ``ec2 launch`` and a fleet's launch template.

    accelerators.py  Elastic Inference sizes and today's accelerator instance families
    ami.py           the AMI (SSM parameter or --ami) and the python3 its name states
    assets.py        what an instance boots from: the plan (content-addressed keys, the manifest), the upload
    model_pins.py    s3:// models read in place: each bucket's region and URL form, the version or sha256 pinned
    boot_status.py   what an instance reports of its boot (its mmsctl:boot tag), and the role's permission to tag
    ei.py            the Elastic Inference endpoint, group and role (and which fleets use them)
    server_image.py  AMI + instance type + user data for one server, as both products launch it
    userdata.py      the boot script (``userdata.sh``) that installs and starts the server under systemd, and the
                     agent it carries (``boot-agent.py.txt``) that fetches, waits and reports at every boot
    tunnels.py       ssh / Session Manager port forwarding to instances' private APIs; ssh config entries
"""
