# The class hub's JupyterHub configuration (launch/hub.sh starts JupyterHub with it).
# Everything comes from the LABKIT_HUB_* variables hub.sh exports; see labkit/hub/settings.py.
from labkit.hub.config import configure
from labkit.hub.settings import from_env

configure(get_config(), from_env())  # noqa: F821  (JupyterHub defines get_config)
