// Loads one SDF or URDF file with the real SDFormat parser (libsdformat) and prints what the
// tests check: parser errors, the model's links and joints (a URDF is converted the way
// gz-sim converts a spawned robot), or the world's models. Exit status 1 on parser errors.
// Built by test/test_sim_gazebo_path.py when libsdformat's development files are present.
#include <iostream>

#include <sdf/sdf.hh>

static void printModel(const sdf::Model &model, const std::string &prefix)
{
  std::cout << prefix << "model " << model.Name() << " static=" << model.Static() << "\n";
  for (uint64_t i = 0; i < model.LinkCount(); ++i)
  {
    // pose in the model frame: x y z roll pitch yaw
    const sdf::Link *link = model.LinkByIndex(i);
    auto pose = link->RawPose();  // ignition:: (sdformat 12) or gz::math (13+) Pose3d
    link->SemanticPose().Resolve(pose, "__model__");
    std::cout << prefix << "link " << link->Name() << " " << pose << "\n";
  }
  for (uint64_t i = 0; i < model.JointCount(); ++i)
  {
    const sdf::Joint *joint = model.JointByIndex(i);
    std::cout << prefix << "joint " << joint->Name() << " "
              << (joint->Type() == sdf::JointType::FIXED ? "fixed" : "other") << " "
              << joint->ParentLinkName() << " " << joint->ChildLinkName() << "\n";
  }
}

int main(int argc, char **argv)
{
  if (argc != 2)
  {
    std::cerr << "usage: sdf_check FILE\n";
    return 2;
  }
  sdf::Root root;
  const sdf::Errors errors = root.Load(argv[1]);
  for (const auto &error : errors)
    std::cout << "error " << error.Message() << "\n";
  if (root.Model())
    printModel(*root.Model(), "");
  for (uint64_t w = 0; w < root.WorldCount(); ++w)
  {
    const sdf::World *world = root.WorldByIndex(w);
    std::cout << "world " << world->Name() << "\n";
    for (uint64_t m = 0; m < world->ModelCount(); ++m)
      printModel(*world->ModelByIndex(m), "  ");
  }
  return errors.empty() ? 0 : 1;
}
