"""The screens of `mmsctl top`: the models list, one model's detail, and modal dialogs."""
