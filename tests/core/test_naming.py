# SPDX-License-Identifier: GPL-3.0-or-later
"""Bone names read as body parts, in the naming schemes captured clips and rigs use (toes too, where a scheme
has them: a retarget holds the foot by heel and toe)."""

from __future__ import annotations

import pytest

from fabrik_addon.core.motion.naming import LIMB_ROLES, ROLES, fingers_of, role_of, roles_of

SIDES = {"L": "Left", "R": "Right"}


def expected(side_names: dict[str, str], middle: dict[str, str]) -> dict[str, str]:
    """The roles of a scheme whose sided bones are named by a pattern for each part."""
    out = dict(middle)
    for side in "LR":
        for part, pattern in side_names.items():
            out[f"{part}.{side}"] = pattern.format(side=side, Side=SIDES[side], s=side.lower())
    return out


SCHEMES = {
    "CMU BVH": (["Hips", "LHipJoint", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToeBase", "RHipJoint", "RightUpLeg",
                 "RightLeg", "RightFoot", "RightToeBase", "LowerBack", "Spine", "Spine1", "Neck", "Neck1", "Head",
                 "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand", "LThumb", "RightShoulder", "RightArm",
                 "RightForeArm", "RightHand", "RThumb"],
                expected({"shoulder": "{Side}Shoulder", "upper_arm": "{Side}Arm", "forearm": "{Side}ForeArm",
                          "hand": "{Side}Hand", "thigh": "{Side}UpLeg", "shin": "{Side}Leg", "foot": "{Side}Foot",
                          "toe": "{Side}ToeBase"},
                         {"hips": "Hips", "neck": "Neck", "head": "Head"})),
    "Mixamo": ([f"mixamorig:{n}" for n in ("Hips", "Spine", "Spine1", "Spine2", "Neck", "Head", "LeftShoulder",
                "LeftArm", "LeftForeArm", "LeftHand", "RightShoulder", "RightArm", "RightForeArm", "RightHand",
                "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToeBase", "RightUpLeg", "RightLeg", "RightFoot",
                "RightToeBase")],
               {role: f"mixamorig:{name}" for role, name in expected(
                   {"shoulder": "{Side}Shoulder", "upper_arm": "{Side}Arm", "forearm": "{Side}ForeArm",
                    "hand": "{Side}Hand", "thigh": "{Side}UpLeg", "shin": "{Side}Leg", "foot": "{Side}Foot",
                    "toe": "{Side}ToeBase"},
                   {"hips": "Hips", "neck": "Neck", "head": "Head"}).items()}),
    "MotionBuilder BVH": (["Hips", "LeftHip", "LeftKnee", "LeftAnkle", "RightHip", "RightKnee", "RightAnkle", "Chest",
                           "LeftCollar", "LeftShoulder", "LeftElbow", "LeftWrist", "RightCollar", "RightShoulder",
                           "RightElbow", "RightWrist", "Neck", "Head"],
                          expected({"shoulder": "{Side}Collar", "upper_arm": "{Side}Shoulder",
                                    "forearm": "{Side}Elbow", "hand": "{Side}Wrist", "thigh": "{Side}Hip",
                                    "shin": "{Side}Knee", "foot": "{Side}Ankle"},
                                   {"hips": "Hips", "neck": "Neck", "head": "Head"})),
    "MotionBuilder BVH, no collar": (["Hips", "LeftHip", "LeftKnee", "LeftAnkle", "RightHip", "RightKnee",
                                      "RightAnkle", "Chest", "LeftShoulder", "LeftElbow", "LeftWrist",
                                      "RightShoulder", "RightElbow", "RightWrist", "Neck", "Head"],
                                     expected({"upper_arm": "{Side}Shoulder", "forearm": "{Side}Elbow",
                                               "hand": "{Side}Wrist", "thigh": "{Side}Hip", "shin": "{Side}Knee",
                                               "foot": "{Side}Ankle"}, {"hips": "Hips", "neck": "Neck", "head": "Head"})),
    "side letters without a separator": (["Pelvis", "ThighL", "CalfL", "FootL", "ThighR", "CalfR", "FootR", "Neck",
                                          "Head", "ClavicleL", "UpperArmL", "ForeArmL", "HandL", "ClavicleR",
                                          "UpperArmR", "ForeArmR", "HandR"],
                                         expected({"shoulder": "Clavicle{side}", "upper_arm": "UpperArm{side}",
                                                   "forearm": "ForeArm{side}", "hand": "Hand{side}",
                                                   "thigh": "Thigh{side}", "shin": "Calf{side}", "foot": "Foot{side}"},
                                                  {"hips": "Pelvis", "neck": "Neck", "head": "Head"})),
    "Rigify": ([p + n for p in ("", "ORG-", "DEF-") for n in (
        "spine", "spine.001", "spine.002", "spine.003", "spine.004", "spine.005", "spine.006", "shoulder.L",
        "upper_arm.L", "forearm.L", "hand.L", "thigh.L", "shin.L", "foot.L", "toe.L", "shoulder.R", "upper_arm.R",
        "forearm.R", "hand.R", "thigh.R", "shin.R", "foot.R", "toe.R")],
               expected({"shoulder": "shoulder.{side}", "upper_arm": "upper_arm.{side}", "forearm": "forearm.{side}",
                         "hand": "hand.{side}", "thigh": "thigh.{side}", "shin": "shin.{side}",
                         "foot": "foot.{side}", "toe": "toe.{side}"},
                        {"hips": "spine", "neck": "spine.004", "head": "spine.006"})),
    "Rigify, generated": ([p + n for p in ("ORG-", "DEF-") for n in (
        "spine", "spine.004", "spine.006", "upper_arm.L", "forearm.L", "thigh.L", "shin.L", "upper_arm.R",
        "forearm.R", "thigh.R", "shin.R")] + ["root", "torso", "hips", "chest", "neck", "head", "MCH-ROT-head"] + [
        f"{n}.{s}" for s in "LR" for n in ("shoulder", "upper_arm_fk", "forearm_fk", "hand_fk", "thigh_fk",
                                           "shin_fk", "foot_fk", "toe_fk", "upper_arm_ik", "hand_ik", "thigh_ik",
                                           "foot_ik", "toe_ik", "upper_arm_parent", "thigh_parent")],
        expected({"shoulder": "shoulder.{side}", "upper_arm": "upper_arm_fk.{side}",
                  "forearm": "forearm_fk.{side}", "hand": "hand_fk.{side}", "thigh": "thigh_fk.{side}",
                  "shin": "shin_fk.{side}", "foot": "foot_fk.{side}", "toe": "toe_fk.{side}"},
                 {"hips": "torso", "neck": "neck", "head": "head"})),
    "Unreal": (["root", "pelvis", "spine_01", "spine_02", "spine_03", "neck_01", "head", "clavicle_l", "upperarm_l",
                "lowerarm_l", "hand_l", "clavicle_r", "upperarm_r", "lowerarm_r", "hand_r", "thigh_l", "calf_l",
                "foot_l", "ball_l", "thigh_r", "calf_r", "foot_r", "ball_r"],
               expected({"shoulder": "clavicle_{s}", "upper_arm": "upperarm_{s}", "forearm": "lowerarm_{s}",
                         "hand": "hand_{s}", "thigh": "thigh_{s}", "shin": "calf_{s}", "foot": "foot_{s}",
                         "toe": "ball_{s}"},
                        {"hips": "pelvis", "neck": "neck_01", "head": "head"})),
    "Rokoko": (["Hips", "LeftThigh", "LeftShin", "LeftFoot", "LeftToe", "RightThigh", "RightShin", "RightFoot",
                "RightToe", "Spine1", "Spine2", "Neck", "Head", "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand",
                "RightShoulder", "RightArm", "RightForeArm", "RightHand"],
               expected({"shoulder": "{Side}Shoulder", "upper_arm": "{Side}Arm", "forearm": "{Side}ForeArm",
                         "hand": "{Side}Hand", "thigh": "{Side}Thigh", "shin": "{Side}Shin", "foot": "{Side}Foot",
                         "toe": "{Side}Toe"},
                        {"hips": "Hips", "neck": "Neck", "head": "Head"})),
    "Character Creator": ([f"CC_Base_{n}" for n in ("Hip", "Pelvis", "L_Thigh", "L_Calf", "L_Foot", "R_Thigh",
                          "R_Calf", "R_Foot", "NeckTwist01", "Head", "L_Clavicle", "L_Upperarm", "L_Forearm",
                          "L_Hand", "R_Clavicle", "R_Upperarm", "R_Forearm", "R_Hand")],
                         {role: f"CC_Base_{name}" for role, name in expected(
                             {"shoulder": "{side}_Clavicle", "upper_arm": "{side}_Upperarm",
                              "forearm": "{side}_Forearm", "hand": "{side}_Hand", "thigh": "{side}_Thigh",
                              "shin": "{side}_Calf", "foot": "{side}_Foot"},
                             {"hips": "Hip", "head": "Head"}).items()}),
}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_maps_its_limbs_hips_and_head(scheme):
    names, wanted = SCHEMES[scheme]
    assert roles_of(names) == wanted


def test_names_that_are_no_body_part_take_no_role():
    for name in ("LHipJoint", "Neck1", "Spine", "root", "LThumb", "IK_target", "Bone.001",
                 "LowerBack", "torso", ""):
        assert role_of(name) is None, name


def test_the_plainest_of_several_bones_takes_the_role_and_roles_are_known():
    assert roles_of(["DEF-thigh.L", "MCH-thigh.L", "ORG-thigh.L"]) == {"thigh.L": "ORG-thigh.L"}
    assert roles_of(["LeftUpLeg", "mixamorig:LeftUpLeg"]) == {"thigh.L": "LeftUpLeg"}
    assert set(ROLES) >= {r for pair in LIMB_ROLES.values() for r in pair}
    assert len(ROLES) == 3 + 16


def test_pole_and_helper_bones_named_for_joints_do_not_make_a_skeleton_joint_named():
    """knee.L pole bones on a rig named by its bones, a Knee helper on a Mixamo skeleton: the upper arm stays the
    upper arm (only a collar, or an elbow and a knee with no bone named for the forearm or shin, mean joints)."""
    rig = ["spine", "shoulder.L", "upper_arm.L", "forearm.L", "hand.L", "thigh.L", "shin.L", "foot.L", "knee.L",
           "ankle.L", "elbow.L"]
    found = roles_of(rig)
    assert found["shoulder.L"] == "shoulder.L" and found["upper_arm.L"] == "upper_arm.L"
    assert found["shin.L"] == "shin.L" and found["forearm.L"] == "forearm.L"
    mixamo = ["Hips", "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand", "LeftUpLeg", "LeftLeg", "LeftKnee"]
    assert roles_of(mixamo)["upper_arm.L"] == "LeftArm" and roles_of(mixamo)["shoulder.L"] == "LeftShoulder"


def test_fingers_are_read_as_chains_from_the_hand_in_every_scheme():
    """Each finger's bones in order from the hand, the plainest of several in one place; a finger's master control
    or a palm bone takes no place, and a hand alone has no finger."""
    mixamo = [f"mixamorig:LeftHand{f}{i}" for f in ("Thumb", "Index") for i in (3, 1, 2)] + ["mixamorig:LeftHand"]
    assert fingers_of(mixamo) == {"thumb.L": [f"mixamorig:LeftHandThumb{i}" for i in (1, 2, 3)],
                                  "index.L": [f"mixamorig:LeftHandIndex{i}" for i in (1, 2, 3)]}
    rigify = ["thumb.01.R", "thumb.02.R", "f_index.01.R", "ORG-f_index.01.R", "DEF-f_index.01.R", "f_index.02.R",
              "f_index.01_master.R", "palm.01.R"]
    assert fingers_of(rigify) == {"thumb.R": ["thumb.01.R", "thumb.02.R"], "index.R": ["f_index.01.R", "f_index.02.R"]}
    assert fingers_of(["pinky_02_l", "pinky_01_l", "ring_01_r", "LThumb"]) == {
        "pinky.L": ["pinky_01_l", "pinky_02_l"], "ring.R": ["ring_01_r"], "thumb.L": ["LThumb"]}
    assert fingers_of(["LeftHand", "Hips", "LeftFingerBase"]) == {}
