"""How students log in to the class hub (``hub.sh --login``): their system password, the university's
single sign-on (OpenID Connect, through oauthenticator), or a launch from the LMS (LTI 1.3, through
jupyterhub-ltiauthenticator, with grade passback: ``labkit.hub.lti``).

Whatever the login, a student's server runs under their own account on this machine: the name the
login gives must be an account. With a roster (``labkit.hub.roster``), a sign-on that names people by
e-mail is mapped to each one's ``id`` (JupyterHub's ``username_map``), and only the roster's people get
in; its instructors are the hub's admins.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from labkit.hub.settings import HubSettings
from labkit.i18n import t

LOGINS = ("pam", "oidc", "lti13")


class LoginError(RuntimeError):
    """The hub cannot start with this login: a setting is missing, or the provider did not answer."""


def discover(issuer: str, timeout: float = 15) -> dict[str, Any]:
    """The provider's OpenID configuration (``/.well-known/openid-configuration`` under its issuer URL)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            found = json.load(r)
    except (OSError, ValueError) as e:
        raise LoginError(t("hub.login.discovery", url=url, error=getattr(e, "reason", e))) from None
    missing = [k for k in ("authorization_endpoint", "token_endpoint") if not found.get(k)]
    if missing:
        raise LoginError(t("hub.login.discovery", url=url, error=f"no {', '.join(missing)}"))
    return found


def _require(settings: HubSettings, **values: str) -> None:
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise LoginError(t("hub.login.missing", login=settings.login, names=", ".join(missing)))


def configure_login(c: Any, settings: HubSettings) -> None:
    """The authenticator, its users and admins, written into JupyterHub's config ``c``."""
    if settings.login not in LOGINS:
        raise LoginError(t("hub.login.unknown", login=settings.login, logins=", ".join(LOGINS)))
    c.Authenticator.allowed_users = set(settings.students) | set(settings.instructors)
    c.Authenticator.admin_users = set(settings.instructors)
    c.Authenticator.username_map = dict(settings.username_map)
    if settings.login == "pam":
        c.JupyterHub.authenticator_class = "jupyterhub.auth.PAMAuthenticator"
        c.PAMAuthenticator.open_sessions = False  # no login session per server: none is needed, and containers lack it
    elif settings.login == "oidc":
        _oidc(c, settings)
    else:
        _lti13(c, settings)


def _oidc(c: Any, settings: HubSettings) -> None:
    _require(settings, LABKIT_HUB_OIDC_ISSUER=settings.oidc_issuer, LABKIT_HUB_OIDC_CLIENT_ID=settings.oidc_client_id)
    found = discover(settings.oidc_issuer)
    c.JupyterHub.authenticator_class = "oauthenticator.generic.GenericOAuthenticator"
    a = c.GenericOAuthenticator
    a.login_service = settings.oidc_name
    a.client_id = settings.oidc_client_id
    a.client_secret = settings.oidc_client_secret
    a.authorize_url = found["authorization_endpoint"]
    a.token_url = found["token_endpoint"]
    # the id_token comes straight from the token endpoint (not through the browser): its audience and
    # expiry are checked, and who it names is the login
    a.userdata_from_id_token = True
    a.scope = ["openid", "email", "profile"]
    a.username_claim = settings.login_claim
    if settings.public_url:
        a.oauth_callback_url = settings.public_url.rstrip("/") + "/hub/oauth_callback"


def _lti13(c: Any, settings: HubSettings) -> None:
    _require(
        settings,
        LABKIT_HUB_LTI_ISSUER=settings.lti_issuer,
        LABKIT_HUB_LTI_CLIENT_ID=settings.lti_client_id,
        LABKIT_HUB_LTI_AUTHORIZE_URL=settings.lti_authorize_url,
        LABKIT_HUB_LTI_JWKS_URL=settings.lti_jwks_url,
    )
    from labkit.hub import lti

    c.JupyterHub.authenticator_class = "ltiauthenticator.lti13.auth.LTI13Authenticator"
    a = c.LTI13Authenticator
    a.issuer = settings.lti_issuer
    a.client_id = {settings.lti_client_id}
    a.authorize_url = settings.lti_authorize_url
    a.jwks_endpoint = settings.lti_jwks_url  # the launch's id_token is checked against the platform's keys
    a.username_key = settings.login_claim
    c.Authenticator.post_auth_hook = lti.remember_launch  # the activity's line item, for grade passback
