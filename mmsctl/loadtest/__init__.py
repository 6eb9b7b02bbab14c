"""`mmsctl bench`: closed- and open-loop load against any MMS, TorchServe or mmsctl server."""
