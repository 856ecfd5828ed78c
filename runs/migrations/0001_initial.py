"""The app's tables arrive with its issue; this initial migration gives the app its own history
from the start, so later migrations never have to be squeezed in before another app's."""

from django.db import migrations


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = []
