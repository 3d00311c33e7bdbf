"""A student's home at first login: the course's student edition in their language, and ``submit/``.

Runs in the hub (root), before each server starts. What is there already is left alone: a
student's own work is never overwritten, and a language chosen later is added beside the first.

    ~/fsdp-course/ro/00_setup.ipynb ...   the student edition (solutions removed), copied once
    ~/submit -> <state>/submissions/<user>   theirs (0770, group: the instructors); a notebook
                                              saved there is a submission for ``labkit grade``
    ~/feedback -> <state>/exchange/feedback/<user>   their released reports (``labkit feedback``), read-only

JupyterLab's own menus speak the language chosen at each start: ``~/.jupyter/lab/user-settings``
holds its translation setting (``ro_RO``, from the Romanian language pack of the ``lab`` extra, or
``en``), the student's other settings in that file kept.

Instructors get ``~/submissions`` -> ``<state>/submissions``: one folder per student, the layout
``labkit grade`` reads. The folder above the students' is 0751: instructors list it, a student
can only reach their own.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess

from labkit.hub.settings import HubSettings

COURSE = "fsdp-course"
# JupyterLab's locale for each course language (ro_RO: the jupyterlab-language-pack-ro-RO package)
LAB_LOCALES = {"en": "en", "ro": "ro_RO"}
LAB_SETTINGS = (".jupyter", "lab", "user-settings", "@jupyterlab", "translation-extension")
LAB_TRANSLATION = "plugin.jupyterlab-settings"  # @jupyterlab/translation-extension:plugin


def ensure_instructors_group(settings: HubSettings) -> int:
    """The instructors' group, with every instructor in it; its gid."""
    name = settings.instructors_group
    try:
        grp.getgrnam(name)
    except KeyError:
        subprocess.run(["groupadd", "--system", name], check=True)
    for user in settings.instructors:
        if user not in grp.getgrnam(name).gr_mem:
            subprocess.run(["gpasswd", "--add", user, name], check=True, capture_output=True)
    root = settings.submissions
    os.makedirs(root, exist_ok=True)
    gid = grp.getgrnam(name).gr_gid
    os.chown(root, 0, gid)
    os.chmod(root, 0o751)
    for user in settings.instructors:  # ~/submissions from the start, before their first login
        pw = pwd.getpwnam(user)
        if os.path.isdir(pw.pw_dir):
            link(os.path.join(pw.pw_dir, "submissions"), root, pw)
    # the exchange service's inbound/ (labkit.classroom.exchange): its instructors collect from it, no student reads it
    inbound = os.path.join(settings.exchange, "inbound")
    os.makedirs(inbound, exist_ok=True)
    os.chown(inbound, 0, gid)
    os.chmod(inbound, 0o750)
    return gid


def chown_tree(path: str, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def prepare_home(user: str, lang: str, settings: HubSettings) -> str:
    """Make ``user``'s home ready for a server in ``lang``; returns the lesson folder (relative to home)."""
    pw = pwd.getpwnam(user)
    home = pw.pw_dir
    os.makedirs(home, exist_ok=True)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    os.chmod(home, 0o700)  # a student's notebooks, runs and caches are theirs alone
    course = os.path.join(home, COURSE)
    if not os.path.isdir(course):
        os.mkdir(course, 0o755)
        os.chown(course, pw.pw_uid, pw.pw_gid)
    lessons = os.path.join(course, lang)
    if not os.path.exists(lessons):
        shutil.copytree(os.path.join(settings.editions, lang), lessons)
        chown_tree(lessons, pw.pw_uid, pw.pw_gid)
    gid = grp.getgrnam(settings.instructors_group).gr_gid
    if user in settings.instructors:
        link(os.path.join(home, "submissions"), settings.submissions, pw)
    else:
        mine = os.path.join(settings.submissions, user)
        os.makedirs(mine, exist_ok=True)
        os.chown(mine, pw.pw_uid, gid)
        os.chmod(mine, 0o2770)  # setgid: what the student saves there is readable by the instructors
        link(os.path.join(home, "submit"), mine, pw)
        link(os.path.join(home, "feedback"), feedback_folder(user, settings, pw), pw)
    lab_language(home, lang, pw.pw_uid, pw.pw_gid)
    return f"{COURSE}/{lang}"


def feedback_folder(user: str, settings: HubSettings, pw: pwd.struct_passwd) -> str:
    """``<state>/exchange/feedback/<user>``: what ``labkit feedback`` releases to them (as root), which they
    read as ``~/feedback`` and cannot write (root's, their group's: 0750)."""
    folder = os.path.join(settings.exchange, "feedback", user)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    os.chown(folder, 0, pw.pw_gid)
    os.chmod(folder, 0o750)
    return folder


def lab_language(home: str, lang: str, uid: int, gid: int) -> bool:
    """JupyterLab's language for ``lang``, in the student's settings; False if left alone.

    Written as root in a folder the student owns, so nothing is followed: a link on the way (or
    instead of the file) leaves the setting unwritten, and the file is replaced by a rename, never
    written through. A settings file that is not plain JSON is the student's own work: left alone.
    """
    opened: list[int] = []
    try:
        opened.append(os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
        for name in LAB_SETTINGS:
            opened.append(_subfolder(opened[-1], name, uid, gid))
        folder = opened[-1]
        settings = _read_settings(folder)
        if settings is None:
            return False
        settings["locale"] = LAB_LOCALES.get(lang, "en")
        temporary = f".{LAB_TRANSLATION}.labkit"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=folder)
        with os.fdopen(fd, "w") as f:
            os.fchown(f.fileno(), uid, gid)
            json.dump(settings, f, indent=2)
        os.rename(temporary, LAB_TRANSLATION, src_dir_fd=folder, dst_dir_fd=folder)
        return True
    except OSError:  # a link, a file where a folder should be: the lab stays in its default language
        return False
    finally:
        for fd in opened:
            os.close(fd)


def _subfolder(parent: int, name: str, uid: int, gid: int) -> int:
    """``name`` in the folder ``parent`` (made, and the student's, when missing), opened."""
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass
    else:
        os.chown(name, uid, gid, dir_fd=parent, follow_symlinks=False)
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)


def _read_settings(folder: int) -> dict | None:
    """What the translation settings hold now ({} when there are none); None when they are not plain JSON."""
    try:
        fd = os.open(LAB_TRANSLATION, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        return {}
    with os.fdopen(fd) as f:
        try:
            settings = json.loads(f.read(1 << 20) or "{}")
        except ValueError:
            return None
    return settings if isinstance(settings, dict) else None


def link(path: str, target: str, pw: pwd.struct_passwd) -> None:
    if not os.path.lexists(path):
        os.symlink(target, path)
        os.lchown(path, pw.pw_uid, pw.pw_gid)
