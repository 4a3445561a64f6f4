"""What every part of the window shares: the controller (the Player behind Qt signals,
used by the main window and the compare window), settings, the theme, widgets, file and
folder dialogs, help."""
